verify pmanual_axis_index_data2_model4_sdy.hlo --mesh data=2,model=4
